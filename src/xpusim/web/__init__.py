"""`xpusim web`: one page and a JSON API over the same Python API the command line uses.

The server is an optional extra (`pip install 'xpusim[web]'`: FastAPI and uvicorn), imported
only by `xpusim web`. Modules: `schemas` (what a request may say, with the limits on the work
one request may ask for), `views` (results and chips as the page draws them), `app` (routes,
errors as 400s, simulations off the event loop) and `static/` (the page, which loads nothing
from outside the package). docs/web.md says how to use it and what was measured.
"""
