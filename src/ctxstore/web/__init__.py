"""The web console's parts (``ctxstore[web]``), built without importing a web framework here.

- :mod:`ctxstore.web.access`: the bind rule (a non-loopback address needs a token) and the
  token gate, a plain ASGI middleware (bearer header or the login form's cookie, else 401);
- :mod:`ctxstore.web.tenants`: the namespaces a console serves, one store each, and nothing
  else.

``import ctxstore`` never imports this package.
"""
