"""ConfigObject: what Keras's small serializable objects (initializers,
regularizers) share: ``from_config``, equality and hashing by class and
config, and a repr of the config."""


class ConfigObject:
    """A base for classes whose state is their ``get_config()``."""

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self):
        return hash(type(self).__name__)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % kv for kv in self.get_config().items()))
