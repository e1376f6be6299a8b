"""No name of the installed MindFormers 1.9 is judged a secret's, but the listed ones.

The fixture of tests/hostile/test_side_files_secret_names.py is a copy of these names;
this reads them from the real install (its configs' YAML keys, its config classes'
fields), so a new MindFormers name that the rules would mask is caught. It lives here
because the ``mindformers_python`` fixture builds the venv it reads.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mindwatch.common.redact import secret_name
from tests.hostile.test_side_files_secret_names import SECRETS_OF_MINDFORMERS, mindformers_names


def test_no_name_of_the_installed_mindformers_is_a_secret_but_the_listed_ones(
    mindformers_python: Path,
) -> None:
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    where = [str(mindformers_python), "-c", purelib]
    site = subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip()
    names = mindformers_names(site)
    assert len(names) > 600
    judged = {name for name in names if secret_name(name)}
    assert judged <= set(SECRETS_OF_MINDFORMERS), judged - set(SECRETS_OF_MINDFORMERS)
