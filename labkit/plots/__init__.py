"""Each notebook's figures, drawn from the numbers its JSON stores (one module per notebook), so a committed
figure can be redrawn without measuring anything."""
