module llmkube.dev/pause

go 1.26
