module donkey/soak-loadgen

go 1.19
