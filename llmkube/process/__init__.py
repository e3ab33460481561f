"""The controller process's command line: its flags (`flags`), the configuration they make
(`config`) and `llmkube controller` itself (`command`). The process it starts is `llmkube.manager`;
this package only turns a command line into one. May import the manager and the controllers' setup,
lazily: building the parser (every start) imports neither."""
