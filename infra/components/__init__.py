"""One construct per concern; MedicStack composes them."""
