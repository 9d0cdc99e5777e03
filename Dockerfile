# The operator image: `docker build -t disttrain/operator:0.1.0 .`; it also serves `disttrain dashboard`.
# It holds the operator (src/) and the contract it shares with the trainer (contract/), nothing
# else: neither the trainer nor the development tools. Every Python package comes from constraints.txt
# (the versions the tests passed with); the final stage installs the built wheels offline and keeps
# neither pip nor any build tool.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
COPY contract ./contract
RUN pip wheel --no-cache-dir --constraint constraints.txt --wheel-dir /wheels ./contract '.[operator,dashboard]'

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
# The user has a passwd entry: Python's getpass and anything else that asks who runs it gets an answer.
RUN pip install --no-cache-dir --no-index --find-links /wheels "disttrain[operator,dashboard]" \
    && rm -rf /wheels \
    && pip uninstall --yes pip setuptools wheel \
    && useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin disttrain
USER 65532:65532
ENTRYPOINT ["disttrain"]
CMD ["operator", "--all-namespaces", "--leader-elect"]
