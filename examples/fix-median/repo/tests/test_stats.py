import pytest

from stats import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_odd_length():
    assert median([3, 1, 2]) == 2


def test_median_even_length():
    assert median([4, 1, 3, 2]) == 2.5


def test_median_unsorted_even_with_duplicates():
    assert median([5, 5, 1, 9]) == 5


def test_median_empty():
    with pytest.raises(ValueError):
        median([])
