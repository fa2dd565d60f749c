"""Chats on remote OpenAI-compatible servers (vLLM, llama.cpp's server, mlx_lm.server, another
Tandem): the servers the user added, their keys in the system keyring, and a backend that
streams a chat's request there and answers with the engine's own event dataclasses, so a chat
tab shows a remote reply as it shows a local one."""
