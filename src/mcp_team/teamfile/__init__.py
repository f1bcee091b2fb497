"""Team files (`team.toml`): finding and loading one (`loading`), what is wrong with one (`problems`), team files
inside team files (`subteams`), writing a starter and the presets (`starter`, `presets/`)."""
