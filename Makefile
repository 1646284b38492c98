# Every developer command. `make demo` and `make test` install what is missing first.
.PHONY: demo test bootstrap bench lint docs

bootstrap:
	@scripts/bootstrap.sh

demo: bootstrap
	@.venv/bin/turkflow demo

test: bootstrap
	@.venv/bin/python -m pytest $(PYTEST_ARGS)

bench: bootstrap
	@.venv/bin/python -m bench

lint: bootstrap
	@.venv/bin/python -m ruff check turkflow workers tests bench scripts

# The documentation site, into site/: the reference pages regenerated from the code, then MkDocs, strict.
docs: bootstrap
	@.venv/bin/python scripts/docs.py
	@NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict
