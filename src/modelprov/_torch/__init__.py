"""The torch edge: every private torch API (version-guarded and tested), and which node of
the user's program an FX node came from."""
