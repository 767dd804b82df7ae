"""What make and CI run on the host (kind keeps its own in hack/): the Docker engine, preflight and prerequisites,
the stack lock, pulumi's outcome, the secrets check, what a lab left and the Docker lab's source cache
(`make cache`). The Python ones run as modules from the project folder (`python3 -m hack.stack_state STACK`), so
they import gpulab's packages with no sys.path edit. stack_state runs by the host's python3 before ./venv exists,
so standard library only; secrets_check runs the same way, hands the stack file to ./venv's loader, and waits for
./venv when there is none. What the lab itself runs is scripts/."""
