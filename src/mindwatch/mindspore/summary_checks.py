"""MindSpore 2.10's argument checks of ``SummaryRecord`` and ``SummaryCollector``: the
same order, the same exception types, the same messages.

Code written for MindSpore catches these exceptions and its tests compare these
messages, so a misuse raises exactly what MindSpore raises (``tests/mindspore/
test_summary_fronts.py`` runs every case on both classes and compares type and
message). The messages stay MindSpore's English, untranslated: they are MindSpore's
text, which programs match. Where MindSpore's message does not say which value was
wrong or how to fix it, mindwatch adds that after it (MindSpore's message stays the
start). What mindwatch accepts beyond MindSpore (a ``pathlib.Path`` folder, ``~``
expanded) is the documented superset in ``docs/coming-from-summarycollector.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, Optional

__all__ = [
    "DEFAULT_SPECIFIED_DATA",
    "EXPORT_OPTIONS",
    "check_collect_landscape",
    "check_custom_lineage",
    "check_file_affixes",
    "check_positive",
    "check_record_file_size",
    "check_value_type",
    "make_directory",
    "match_anchored",
    "process_export_options",
    "process_specified_data",
    "validator_check_type",
]

# MindSpore's _make_dir limit on the resolved path (mindspore.parallel._parallel_serialization).
MAX_PATH_LENGTH = 1024
# MindSpore's SummaryCollector._DEFAULT_SPECIFIED_DATA (its default landscape included:
# it is what MindSpore validates and reports; mindwatch records no landscape).
DEFAULT_SPECIFIED_DATA: dict[str, Any] = {
    "collect_metric": True,
    "collect_graph": True,
    "collect_train_lineage": True,
    "collect_eval_lineage": True,
    "collect_input_data": True,
    "collect_dataset_graph": True,
    "histogram_regular": None,
    "collect_landscape": {
        "landscape_size": 40,
        "unit": "step",
        "num_samples": 2048,
        "create_landscape": {"train": True, "result": True},
        "intervals": [[1, 2, 3, 4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]],
    },
}
# MindSpore's _DEFAULT_EXPORT_OPTIONS. The same set literal as MindSpore's, so that its
# iteration order (and the list printed in the message) is MindSpore's in this process.
EXPORT_OPTIONS: dict[str, set[Optional[str]]] = {"tensor_format": {"npy", None}}
# MindSpore's file name rule for file_prefix / file_suffix (_checkparam.check_str_by_regular).
_AFFIX = r"^\w+[0-9a-zA-Z\_\.]*$"
_INLINE_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")


def _names(valid_types: Iterable[type]) -> list[str]:
    return [t.__name__ for t in valid_types]


def check_value_type(arg_name: str, arg_value: Any, valid_types: Any) -> None:
    """``mindspore.train._utils.check_value_type``: a bool is not an int unless bool is
    named."""
    types = tuple(valid_types) if isinstance(valid_types, Iterable) else (valid_types,)
    if (isinstance(arg_value, bool) and bool not in types) or not isinstance(arg_value, types):
        raise TypeError(
            f"For `{arg_name}` the type should be a valid type of {_names(types)}, "
            f"but got {type(arg_value).__name__}."
        )


def validator_check_type(arg_name: str, arg_value: Any, valid_types: Any) -> None:
    """``mindspore._checkparam.check_value_type`` (the other wording MindSpore uses)."""
    types = tuple(valid_types) if isinstance(valid_types, Iterable) else (valid_types,)
    if (isinstance(arg_value, bool) and bool not in types) or not isinstance(arg_value, types):
        names = _names(types)
        expected = f"one of '{names}'" if len(names) > 1 else f"'{names[0]}'"
        raise TypeError(
            f"The type of '{arg_name}' should be {expected}, "
            f"but got type '{type(arg_value).__name__}'."
        )


def make_directory(path: Any, arg_name: str) -> str:
    """MindSpore's ``_make_directory``: the folder, made absolute and created, or its
    errors: TypeError for what is not a string, ValueError for a blank one or one over
    1,024 characters, NotADirectoryError for a file, TypeError for no permission (what
    MindSpore raises), the OS's own error otherwise. mindwatch also takes an
    ``os.PathLike`` (a ``pathlib.Path``) and expands ``~``."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(
            f"The {arg_name} is invalid, the type should be string. Got "
            f"{type(path).__name__}: {path!r:.60}; pass a folder such as './summary_dir'."
        )
    if path.strip() == "":
        raise ValueError(f"The {arg_name} is invalid, it should be non-blank.")
    if "\0" in path:
        # MindSpore lets os.makedirs say only "embedded null byte".
        raise ValueError(
            f"embedded null byte in the {arg_name} {path!r}: no file system takes a NUL "
            "character; check how the path was built."
        )
    real = os.path.realpath(os.path.expanduser(path))
    if len(real) > MAX_PATH_LENGTH:
        raise ValueError(
            f"The {arg_name} length is too long, it should be limited in {MAX_PATH_LENGTH}."
        )
    if os.path.exists(real):
        if not os.path.isdir(real):
            raise NotADirectoryError(
                f"The path({real}) is a file path, it should be a directory path."
            )
        return real
    try:
        os.makedirs(real, exist_ok=True)
    except PermissionError as exc:
        raise TypeError(
            f"No write permission on the directory. Cannot create {real!r} ({exc.strerror}): "
            f"choose a {arg_name} you can write to."
        ) from exc
    return real


def check_file_affixes(file_prefix: Any, file_suffix: Any) -> None:
    """``file_prefix`` and ``file_suffix``: strings made of word characters and dots."""
    if not isinstance(file_prefix, str) or not isinstance(file_suffix, str):
        # MindSpore's message, its double space and its naming of the prefix's type too.
        raise TypeError(
            "For 'SummaryRecord', `file_prefix` and `file_suffix`  should be str, "
            f"but got type {type(file_prefix)}"
        )
    for affix in (file_prefix, file_suffix):
        if re.match(_AFFIX, affix, re.ASCII) is None:
            raise ValueError(
                f"The '{affix}' is illegal, it must be match regular'{_AFFIX}' by "
                f"flags'{re.ASCII}.'"
            )


def check_record_file_size(max_file_size: Any) -> Optional[int]:
    """``SummaryRecord``'s ``max_file_size``: an int (a bool counts, as in MindSpore) or
    None; a negative one means no limit (MindSpore warns and drops it: the caller
    warns)."""
    if not isinstance(max_file_size, (int, type(None))):
        raise TypeError(
            "For 'SummaryRecord', the 'max_file_size' should be int type, "
            f"but got type {type(max_file_size)}"
        )
    return None if max_file_size is None else int(max_file_size)


def check_positive(name: str, value: Any, allow_none: bool = False) -> None:
    """``SummaryCollector._check_positive``: an int > 0 (or None when allowed)."""
    if allow_none and value is None:
        return
    check_value_type(name, value, int)
    if value <= 0:
        raise ValueError(
            f'For "SummaryCollector", the value of `{name}` should be greater than 0, '
            f"but got `{value}`."
        )


def process_export_options(options: Any) -> Optional[dict[str, Optional[str]]]:
    """MindSpore's ``process_export_options``."""
    if options is None:
        return None
    check_value_type("export_options", options, [dict, type(None)])
    for option, fmt in options.items():
        check_value_type("export_option", option, [str])
        check_value_type("export_format", fmt, [str, type(None)])
    unexpected = set(options) - set(EXPORT_OPTIONS)
    if unexpected:
        raise ValueError(
            f'For "SummaryRecord", the keys {unexpected} of "export_options" are unsupported, '
            f"expect the follow keys: {list(EXPORT_OPTIONS.keys())}"
        )
    for option, fmt in options.items():
        allowed = EXPORT_OPTIONS[option]
        if {fmt} - allowed:
            raise ValueError(
                f'For "SummaryRecord", the export_format { ({fmt} - allowed) } of "export_options" '
                f"are unsupported for {option}, expect the follow values: {list(allowed)}"
            )
    return dict(options)


def process_specified_data(data: Any, keep_default_action: bool) -> dict[str, Any]:
    """MindSpore's ``_process_specified_data``: ``collect_specified_data`` checked and
    merged with the defaults when ``keep_default_action``."""
    check_value_type("collect_specified_data", data, [dict, type(None)])
    if data is None:
        return dict(DEFAULT_SPECIFIED_DATA) if keep_default_action else {}
    for key in data:
        check_value_type(key, key, [str])
    unexpected = set(data) - set(DEFAULT_SPECIFIED_DATA)
    if unexpected:
        raise ValueError(
            f'For "SummaryCollector", the keys {unexpected} of `collect_specified_data` are '
            f"unsupported, expect the follow keys: {list(DEFAULT_SPECIFIED_DATA.keys())}"
        )
    if "histogram_regular" in data:
        regular = data["histogram_regular"]
        check_value_type("histogram_regular", regular, (str, type(None)))
        if isinstance(regular, str):
            try:
                re.match(regular, "")
            except re.error as exc:
                raise ValueError(
                    "For `collect_specified_data`, the value of `histogram_regular` is not a "
                    f"valid regular expression. Detail: {exc}."
                ) from exc
    for key in DEFAULT_SPECIFIED_DATA:
        if key not in ("histogram_regular", "collect_landscape") and key in data:
            check_value_type(key, data[key], bool)
    if keep_default_action:
        return {**DEFAULT_SPECIFIED_DATA, **data}
    return dict(data)


def check_collect_landscape(landscape: Any) -> None:
    """MindSpore's checks of ``collect_landscape`` (a dict or None; an empty dict or None
    is not checked further). Note MindSpore's own quirk, kept: ``intervals`` has no
    default, so a landscape dict without it raises."""
    check_value_type("collect_landscape", landscape, [dict, type(None)])
    if not landscape:
        return
    defaults = DEFAULT_SPECIFIED_DATA["collect_landscape"]
    unexpected = set(landscape) - set(defaults)
    if unexpected:
        raise ValueError(
            f'For "SummaryCollector", the keys {unexpected} of `collect_landscape` are '
            f"unsupported, expect the follow keys: {list(defaults.keys())}"
        )
    size = landscape.get("landscape_size", 40)
    check_value_type("landscape_size", size, int)
    if size < 3 or size > 256:
        raise ValueError(
            'For "SummaryCollector", the "landscape_size" in collect_specified_data should be '
            f"less than 256 and more than 3, but got the: {size}"
        )
    unit = landscape.get("unit", "step")
    check_value_type("unit", unit, str)
    if unit not in ("step", "epoch"):
        raise ValueError(
            'For "SummaryCollector", unit in collect_specified_data should be step or epoch, '
            f"but got the: {unit}."
        )
    check_value_type("num_samples", landscape.get("num_samples", 2048), int)
    create = landscape.get("create_landscape", {"train": True, "result": True})
    check_value_type("create_landscape", create, dict)
    for key, value in create.items():
        if key not in ("train", "result"):
            raise ValueError(
                'For "SummaryCollector", the key to create landscape should be in '
                f'["train", "result"], but got the: {key}.'
            )
        check_value_type(key, value, bool)
    intervals = landscape.get("intervals")
    if "intervals" not in landscape:
        # MindSpore's message, then why: unlike the other keys, it has no default.
        raise TypeError(
            "For `intervals` the type should be a valid type of ['list'], but got NoneType. "
            "collect_landscape has no default intervals: give them (e.g. [[1, 2, 3]]) or "
            "drop collect_landscape (mindwatch records no loss landscape)."
        )
    check_value_type("intervals", intervals, list)
    for interval in intervals:
        check_value_type("each interval inintervals", interval, list)  # MindSpore's typo
        if len(interval) < 3:
            raise ValueError(
                'For "SummaryCollector", the length of each list in "intervals" should not be '
                f"less than three, but got the: {interval}"
            )
        for item in interval:
            if not isinstance(item, int):
                raise TypeError(
                    'For "SummaryCollector", the value of each list in "intervals" should be '
                    f"int, but got the: {type(item)}"
                )


def check_custom_lineage(data: Any) -> dict[str, Any]:
    """``custom_lineage_data``: None or a dict of str to int, str or float."""
    if data is None:
        return {}
    check_value_type("custom_lineage_data", data, [dict, type(None)])
    for key, value in data.items():
        check_value_type(f"custom_lineage_data -> {key}", key, str)
        check_value_type(f"the value of custom_lineage_data -> {key}", value, (int, str, float))
    return dict(data)


def match_anchored(regular: str) -> str:
    """``regular`` as a ``re.search`` pattern that matches where ``re.match`` does
    (MindSpore's ``histogram_regular`` is matched at the start of the name; mindwatch's
    ``target`` is searched), its leading inline flags kept first."""
    flags = _INLINE_FLAGS.match(regular)
    head = flags.group(0) if flags else ""
    return rf"{head}\A(?:{regular[len(head) :]})"
