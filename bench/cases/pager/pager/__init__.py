"""Pages of a list: which items a page holds, how many pages there are, and a page as text."""
from pager.paging import page_count, page_slice
from pager.render import render_page

__all__ = ["page_count", "page_slice", "render_page"]
