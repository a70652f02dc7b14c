module tidegate.io/bench/grpc-backend

go 1.24
