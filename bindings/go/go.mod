module libreshard.dev/reshard

go 1.19
