"""Each notebook's figures, drawn from the numbers its JSON stores (one module per notebook), so a committed
figure can be redrawn without measuring anything."""


def trial_axes(ax, ylabel: str, title: str, title_size: float = 10, xlabel: str = "trial", **legend) -> None:
    """The axes of a best-so-far plot: trials along x (whole numbers), ``ylabel``, ``title``, the legend."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=title_size)
    ax.legend(**legend)
    ax.figure.tight_layout()
