"""`xpusim plan`: the deployment decision. For each chip, the candidate configurations
(space.py; each side of a disaggregated layout's plans, sides.py), a cheap bound on each
from `run`'s unloaded costs (bounds.py), the serving simulation of those that can still win
(search.py), the front people compare systems by (front.py) and the launch files of the
choice (launch.py)."""
