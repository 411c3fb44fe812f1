"""The public surface: what ``from sdk import ...`` offers must not change by accident."""

from __future__ import annotations

import sdk

EXPECTED = [
    "ApiError",
    "AsyncChainHandle",
    "AsyncClient",
    "AsyncContext",
    "AsyncGroupHandle",
    "AsyncTaskHandle",
    "Backoff",
    "BackoffStrategy",
    "Cancelled",
    "Chain",
    "ChainHandle",
    "Chord",
    "Client",
    "Context",
    "Crontab",
    "Fail",
    "Group",
    "GroupHandle",
    "Interval",
    "Job",
    "JobCreate",
    "JobgateError",
    "OverlapPolicy",
    "PullWorker",
    "QueuePolicy",
    "Retry",
    "Run",
    "RunStatus",
    "Task",
    "TaskCreate",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskNotice",
    "TaskReceipt",
    "TaskSignature",
    "TaskState",
    "TaskTimeout",
    "Warn",
    "Worker",
    "chain",
    "chord",
    "group",
    "task",
    "verify_notice",
]


def test_all_is_the_expected_list() -> None:
    assert sdk.__all__ == EXPECTED


def test_every_name_is_importable_and_comes_from_sdk() -> None:
    for name in sdk.__all__:
        member = getattr(sdk, name)
        assert member.__module__.startswith("sdk."), name


def test_every_sdk_error_derives_from_one_base() -> None:
    for name in ["ApiError", "TaskFailed", "TaskTimeout", "Retry", "Fail", "Cancelled"]:
        assert issubclass(getattr(sdk, name), sdk.JobgateError), name
    assert issubclass(sdk.TaskTimeout, TimeoutError)


def test_sdk_never_imports_gateway() -> None:
    import ast
    from pathlib import Path

    for path in Path(sdk.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "gateway" or n.startswith("gateway.") for n in names), path


def test_the_lazy_names_are_the_type_checkers_names() -> None:
    # sdk/__init__.py names each public name twice: under TYPE_CHECKING (for type checkers and
    # readers) and in _MODULES (what __getattr__ imports on first use). They must agree.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(sdk.__file__).read_text())
    (checking,) = (n for n in tree.body if isinstance(n, ast.If))
    typed = {
        alias.name: node.module
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == sdk._MODULES
    assert sorted(typed) == sorted(sdk.__all__)
