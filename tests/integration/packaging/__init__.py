"""Integration tests of where the package runs: wheels, Spark versions, Spark Connect, notebooks, brokers, the development tools."""
