def square_area(side):
    return side * 4
