"""Static graphs (placeholder until the graph bindings land)."""


def model(name):
    raise NotImplementedError("weft.model")
