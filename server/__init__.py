"""Tandem's OpenAI-compatible HTTP server over the engine (`tandem serve`, or the app's "Local
server" toggle), on aiohttp so it runs in any asyncio loop: asyncio's own or the app's qasync one.

    server = LocalServer(engine, host="127.0.0.1", port=8080, api_key=None)
    await server.start()            # the engine must be started; returns the bound port
    ...
    await server.stop()

Nothing here imports Qt; requests reach the engine only through `engine.api`.
"""
