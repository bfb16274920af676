def cents(amount):
    return int(amount * 10)
