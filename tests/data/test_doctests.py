"""The Examples sections of the data-source and model-registry docstrings run and are right."""

import doctest

import bnpcore.data._base
import bnpcore.data.documents
import bnpcore.data.sequences
import bnpcore.io._registry
import pytest


@pytest.mark.parametrize(
    "module",
    [bnpcore.data._base, bnpcore.data.documents, bnpcore.data.sequences, bnpcore.io._registry],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
