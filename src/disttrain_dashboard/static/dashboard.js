// Live updates from the dashboard's server-sent events. Values are set as text, never as markup.
"use strict";

const FIELDS = ["namespace", "name", "kind", "phase", "ready", "restarts", "progress", "queue", "age"];

function cell(row, field) {
  return row.querySelector(`[data-field="${field}"]`);
}

function newRow(job) {
  const row = document.createElement("tr");
  for (const field of FIELDS) {
    const td = document.createElement("td");
    td.dataset.field = field;
    if (field === "name") {
      td.appendChild(document.createElement("a"));
    }
    row.appendChild(td);
  }
  return row;
}

function fill(row, job) {
  row.dataset.key = job.key;
  for (const field of FIELDS) {
    const td = cell(row, field);
    if (field === "name") {
      const link = td.querySelector("a");
      link.textContent = job.name;
      link.href = job.href;
    } else {
      td.textContent = job[field];
    }
  }
  const phase = cell(row, "phase");
  phase.className = `phase phase-${job.phase}`;
}

function findRow(body, key) {
  return Array.from(body.rows).find((row) => row.dataset.key === key);
}

function placeRow(body, row, job) {
  const after = Array.from(body.rows).find((other) => {
    const otherKey = [cell(other, "namespace").textContent, cell(other, "name").textContent];
    return otherKey.join("/") > [job.namespace, job.name].join("/");
  });
  body.insertBefore(row, after || null);
}

function followList(table) {
  const body = table.tBodies[0];
  const empty = document.getElementById("empty");
  const changes = new EventSource(table.dataset.changes);
  changes.addEventListener("job", (event) => {
    const job = JSON.parse(event.data);
    let row = findRow(body, job.key);
    if (!row) {
      row = newRow(job);
      fill(row, job);
      placeRow(body, row, job);
    } else {
      fill(row, job);
    }
    empty.hidden = body.rows.length > 0;
  });
  changes.addEventListener("removed", (event) => {
    const row = findRow(body, JSON.parse(event.data).key);
    if (row) {
      row.remove();
    }
    empty.hidden = body.rows.length > 0;
  });
  changes.addEventListener("open", live);
}

function followJob(panel) {
  let fetching = null;
  let again = false;
  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = fetch(panel.dataset.panel, { headers: { Accept: "text/html" } });
    try {
      const answer = await fetching;
      if (answer.ok) {
        // The panel is the server's own template, rendered with autoescaping, from this origin.
        const page = new DOMParser().parseFromString(await answer.text(), "text/html");
        panel.replaceChildren(...page.body.childNodes);
      }
    } finally {
      fetching = null;
      if (again) {
        again = false;
        refresh();
      }
    }
  }
  const changes = new EventSource(panel.dataset.changes);
  changes.addEventListener("changed", refresh);
  changes.addEventListener("deleted", () => {
    document.getElementById("gone").hidden = false;
  });
  changes.addEventListener("open", live);
}

// Tests (and curious users) can tell when the page follows the cluster.
function live() {
  document.body.dataset.live = "yes";
}

function autoSubmit(form) {
  for (const select of form.querySelectorAll("select")) {
    select.addEventListener("change", () => form.submit());
  }
}

const jobs = document.getElementById("jobs");
if (jobs) {
  followList(jobs);
  autoSubmit(document.querySelector("form.filters"));
}
const panel = document.getElementById("panel");
if (panel) {
  followJob(panel);
}
