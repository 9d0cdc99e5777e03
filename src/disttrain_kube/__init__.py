"""How every part of disttrain reaches the API server: the client, the operator, the benchmarks and the
development tools connect, send requests and read their failures through here."""
