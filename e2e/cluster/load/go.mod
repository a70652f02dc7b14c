module tidegate.io/e2e/cluster/load

go 1.26.0
