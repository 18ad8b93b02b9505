import pytest
from inventory import Stock, parse_sku


def test_parse_sku_normalizes_case_and_spaces():
    assert parse_sku(" abc-0042 ") == "ABC-0042"


def test_parse_sku_rejects_garbage():
    with pytest.raises(ValueError):
        parse_sku("not a sku")


def test_cannot_remove_more_than_in_stock():
    stock = Stock()
    stock.add("ABC-0001", 2, 150)
    with pytest.raises(ValueError):
        stock.remove("ABC-0001", 3)
    assert stock.quantities["ABC-0001"] == 2


def test_total_value_rounds_to_nearest_cent():
    stock = Stock()
    stock.add("ABC-0001", 2, 500)
    # 1000 cents with 90% off is exactly 100 cents, even though 1000 * (1 - 0.9) is 99.99999999999997 in floats
    assert stock.total_value(discount=0.9) == 100
    assert stock.total_value(discount=0.15) == 850
