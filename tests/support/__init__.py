"""The suites' helpers: clusters, operators, jobs, checks and fakes that more than one test module uses."""
