from pager import page_count, page_slice


def test_first_page_holds_the_first_items():
    assert page_slice(list(range(10)), 1, 3) == [0, 1, 2]


def test_last_page_holds_the_rest():
    assert page_slice(list(range(10)), 4, 3) == [9]


def test_page_count_rounds_up():
    assert page_count(10, 3) == 4
