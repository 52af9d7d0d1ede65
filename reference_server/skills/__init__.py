"""Skills: the Skills API (routes.py) over a store in the data directory (store.py), uploads
checked (bundle.py), and `container.skills` loading versions into a code execution container
(loading.py)."""
