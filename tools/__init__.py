"""The real upstream programs from pinned Go modules: programs.toml says what, build.py (`make tools`) builds them;
each folder beside them is the Go module that pins one program's source (README.md)."""
