# Every developer command. `make demo` and `make test` install what is missing first.
.PHONY: demo test bootstrap bench lint

bootstrap:
	@scripts/bootstrap.sh

demo: bootstrap
	@scripts/demo.sh

test: bootstrap
	@.venv/bin/python -m pytest $(PYTEST_ARGS)

bench: bootstrap
	@.venv/bin/python -m bench

lint: bootstrap
	@.venv/bin/python -m ruff check turkflow workers tests bench
