"""Tables and predictions → pages: the HTML report of a run (``nslm report``) and the web
explorer over runs (``nslm serve``)."""
