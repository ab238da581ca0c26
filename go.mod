module github.com/sluice-dev/sluice

go 1.26.8
