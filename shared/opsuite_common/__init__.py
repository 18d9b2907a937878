"""opsuite_common: the operators' shared runtime.

:mod:`.aiohttp_defaults` is imported first, so that aiohttp, whoever imports it next (kopf,
the HTTP servers), is already imported without its default contexts' trust store.
"""

import opsuite_common.aiohttp_defaults  # noqa: F401
