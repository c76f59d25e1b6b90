"""The storage format: the one Python home of everything the Lua scripts keep in Redis.

Everything that encodes or decodes a message record (:mod:`.records`), a token entry
(:mod:`.tokens`), a branch or checkpoint pointer (:mod:`.pointers`), a field of the chat hash
(:mod:`.fields`, :mod:`.chat`), a summary member (:mod:`.summaries`) or a compaction job entry
(:mod:`.jobs`) goes through these modules, the append path and the import path alike. The
portable form of a whole chat (JSON Lines) is :mod:`.portable`. Constants shared with the Lua
library are checked against it by a test.
"""
