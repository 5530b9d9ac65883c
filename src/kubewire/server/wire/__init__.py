"""The wire: bytes in, requests out; responses and watch streams in, bytes out.

HTTP/1.1 (``http_parse`` turns bytes into requests and ``http_messages`` responses into bytes,
both without sockets; ``http`` is the asyncio Protocol that carries them, with its read and
pipelining bounds in ``http_input``, and ``listen`` takes TLS connections in a few per loop
turn), WebSocket framing (``websocket``), watch stream framing
(``streams``), and body and response encodings: JSON with Go's error texts (``encoding``,
``json_depth``), YAML (``yaml_bodies``) and Kubernetes protobuf (``protobuf``). The wire
imports only the shared core; it knows no resource semantics beyond decoding a body for a kind.
"""
