module tidegate.io/e2e/cluster/probe

go 1.26.0
