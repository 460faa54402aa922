"""Tables and predictions → pages: the HTML report of a run (``nslm report``)."""
