module gpugate.invalid/go-client

go 1.19
