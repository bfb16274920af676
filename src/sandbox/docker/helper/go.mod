module agent-runner/sandboxd

go 1.19
