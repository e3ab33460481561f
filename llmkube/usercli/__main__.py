from llmkube.usercli import kubectl_plugin_main

raise SystemExit(kubectl_plugin_main())
