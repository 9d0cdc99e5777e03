"""How every part of disttrain reaches the API server: the client, the operator, the benchmarks and the
development tools connect through here."""
