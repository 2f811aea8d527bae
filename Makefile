.PHONY: test lint format typecheck bench demo

test:
	uv run pytest

lint:
	uv run ruff check src tests bench
	uv run ruff format --check src tests bench

format:
	uv run ruff format src tests bench
	uv run ruff check --fix src tests bench

typecheck:
	uv run mypy

bench:
	uv run python -m bench

demo:
	uv run raytsystem ingest && uv run raytsystem query "what does a query do when a hash does not match"
