"""What make and CI run on the host (kind keeps its own in hack/): the Docker engine, preflight and prerequisites,
the stack lock, pulumi's outcome, the secrets check, what a lab left and the Docker lab's source cache
(`make cache`). stack_state runs as a file by the host's
python3 before ./venv exists, so standard library only; secrets_check runs the same way, hands the stack file to
./venv's loader, and waits for ./venv when there is none. What the lab itself runs is scripts/."""
