"""Great Expectations' side of the checks: validation, stored results, and GE's own Data Docs.

Each reports folder gets one GE context per process. Its suites and validation results are kept
on disk under `<reports>/_gx/`, and its Data Docs site under `<reports>/data_docs/`: GE's site
builder drops a page whose result is missing from the store, so an in-memory store would wipe
the pages of earlier batches (and of other processes) at every build.

Suite names are `<view>.<scope>`; a validation's run name is `batch-NNNNNN`. GE files both by
those parts, so a result's Data Docs page is
`data_docs/validations/<view>/<scope>/batch-NNNNNN/<run time>/<batch>.html`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote, urlparse

from lakejoin.quality import docs_assets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

SITE = "lakejoin"
DOCS_FOLDER = "data_docs"
STORE_FOLDER = "_gx"
INDEX_LIMIT = 200  # validation results listed on GE's index page, newest first
KEPT_BATCHES = 200  # a view's batches whose validation results and Data Docs pages are kept
# A batch of at most this many rows is validated on the driver (GE's pandas engine), after one
# Spark job that collects them; GE's Spark engine runs one or two jobs per metric over the rows'
# whole plan (10-21 jobs and 1-2 s a tiny batch, session 29). Larger batches stay in Spark. The
# choice is made from the batch's row count, which the batch already knows (`on_driver`): a trial
# collect of a large batch would be a scan thrown away.
DRIVER_ROWS = 100_000
RESULT_FORMAT = {"result_format": "SUMMARY", "return_unexpected_index_query": False}


def on_driver(rows: int | None) -> bool:
    """Whether a batch of `rows` rows (None: not known) is validated on the driver."""
    return rows is not None and rows <= DRIVER_ROWS


@dataclass(frozen=True)
class Validated:
    """One suite run: GE's result and the key it is stored (and rendered) under."""

    scope: str
    result: Any  # ExpectationSuiteValidationResult
    key: Any  # ValidationResultIdentifier
    suite_key: Any  # ExpectationSuiteIdentifier


class DataDocs:
    """The GE context of one reports folder."""

    _open: ClassVar[dict[str, DataDocs]] = {}

    def __init__(self, root: Path) -> None:
        self.root = root
        self.context = _context(root)
        self._serial = 0
        self._sources: dict[str, Any] = {}
        # Each suite's validation definition, made once per process and run again for each batch
        # while its expectations stay the same: (suite name, engine) -> (expectations, definition).
        self._definitions: dict[tuple[str, str], tuple[str, Any]] = {}
        self._warned = False  # said once per process that the pages load from the network

    @classmethod
    def at(cls, root: Path) -> DataDocs:
        key = str(root.resolve())
        if key not in cls._open:
            cls._open[key] = cls(Path(key))
        return cls._open[key]

    def validate(
        self,
        view: str,
        batch_id: int,
        scope: str,
        frame: DataFrame,
        expectations: list[Any],
        *,
        driver: bool = False,
    ) -> Validated:
        """Validate `frame` against `expectations`: collected once and validated on the driver
        with `driver` (see `on_driver`), else by GE's Spark engine."""
        import great_expectations as gx
        from great_expectations.core.run_identifier import RunIdentifier
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        self._serial += 1
        name = f"{view}.{scope}"
        if not hasattr(frame, "sparkSession"):  # a pandas frame lakejoin built (join health)
            data, engine = frame, "pandas"
        else:
            data, engine = (frame.toArrow().to_pandas(), "pandas") if driver else (frame, "spark")
        said = json.dumps([e.configuration.to_json_dict() for e in expectations], sort_keys=True, default=str)
        made = self._definitions.get((name, engine))
        if made is not None and made[0] == said:
            definition = made[1]
        else:
            suite = self.context.suites.add_or_update(
                gx.ExpectationSuite(name=name, expectations=expectations)
            )
            definition = self.context.validation_definitions.add(
                gx.ValidationDefinition(
                    name=f"{name}.{batch_id}.{self._serial}",
                    data=self._batch_definition(engine, name),
                    suite=suite,
                )
            )
            self._definitions[(name, engine)] = (said, definition)
        run_id = RunIdentifier(run_name=f"batch-{batch_id:06d}")
        # No "unexpected index query": to render it, GE's Spark engine analyses a filter by each
        # condition, which fails for a window (a uniqueness check) and makes Spark log an ERROR
        # with a JVM stack trace from its listener bus, for a batch that is fine. The report
        # names the failing keys itself.
        parameters = {"dataframe": data}
        result = definition.run(batch_parameters=parameters, run_id=run_id, result_format=RESULT_FORMAT)
        suite_key = ExpectationSuiteIdentifier(name=name)
        # The same key ValidationDefinition.run stored the result under.
        key = ValidationResultIdentifier(
            expectation_suite_identifier=suite_key, run_id=run_id, batch_identifier=result.batch_id
        )
        return Validated(scope, result, key, suite_key)

    def prune(self, view: str, batch_id: int) -> None:
        """Forget the results of the view's batches before the last KEPT_BATCHES; the next build
        drops their pages (GE's site builder removes a page whose result is gone)."""
        for run in (self.root / STORE_FOLDER / "validations" / view).glob("*/batch-*"):
            number = run.name.removeprefix("batch-")
            if number.isdigit() and int(number) <= batch_id - KEPT_BATCHES:
                shutil.rmtree(run, ignore_errors=True)

    def build(self, validated: list[Validated]) -> list[str | None]:
        """Render the runs' pages, their suites' and GE's index; each run's page, relative to the root."""
        keys = [v.key for v in validated] + [v.suite_key for v in validated]
        self.context.build_data_docs(site_names=[SITE], resource_identifiers=keys)
        pages = [self._page(k) for k in keys]
        site = self.root / DOCS_FOLDER
        # The pages this build wrote, pointed at the scripts and styles shipped with the site.
        written = [site / "index.html", *(self.root / p for p in pages if p is not None)]
        unshipped = docs_assets.localise(site, written)
        if unshipped and not self._warned:
            self._warned = True
            logger.warning("lakejoin: Data Docs pages still load from the network: %s", "; ".join(unshipped))
        return pages[: len(validated)]

    def pages(self, validated: list[Validated]) -> list[str | None]:
        """Where `build` renders each run's page (relative to the root), before it is built."""
        return [self._page(v.key) for v in validated]

    def _page(self, key: Any) -> str | None:
        urls = self.context.get_docs_sites_urls(resource_identifier=key, site_name=SITE, only_if_exists=False)
        if not urls or not urls[0].get("site_url"):
            return None
        page = Path(unquote(urlparse(urls[0]["site_url"]).path))
        return Path(os.path.relpath(page, self.root)).as_posix()

    def _batch_definition(self, engine: str, asset_name: str) -> Any:
        source = self._sources.get(engine)
        if source is None:
            if engine == "pandas":
                source = self.context.data_sources.add_pandas(name="lakejoin_driver")
            else:
                source = self.context.data_sources.add_spark(name="lakejoin", persist=False)
            self._sources[engine] = source
        try:
            asset = source.get_asset(asset_name)
        except LookupError:
            asset = source.add_dataframe_asset(name=asset_name)
        try:
            return asset.get_batch_definition("whole")
        except (KeyError, LookupError):
            return asset.add_batch_definition_whole_dataframe("whole")


def _context(root: Path) -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    def on_disk(folder: str) -> dict[str, str]:
        return {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(root / folder)}

    defaults = InMemoryStoreBackendDefaults()
    stores = dict(defaults.stores)
    stores[defaults.expectations_store_name] = {
        "class_name": "ExpectationsStore",
        "store_backend": on_disk(f"{STORE_FOLDER}/expectations"),
    }
    stores[defaults.validation_results_store_name] = {
        "class_name": "ValidationResultsStore",
        "store_backend": on_disk(f"{STORE_FOLDER}/validations"),
    }
    config = DataContextConfig(
        store_backend_defaults=defaults,
        stores=stores,
        data_docs_sites={
            SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": on_disk(DOCS_FOLDER),
                "site_index_builder": {
                    "class_name": "DefaultSiteIndexBuilder",
                    "validation_results_limit": INDEX_LIMIT,
                },
            }
        },
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)
