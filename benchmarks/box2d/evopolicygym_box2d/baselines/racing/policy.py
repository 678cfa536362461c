"""CarRacing baseline: steer toward the road's centre a little ahead of the car, modest gas.

The frame is 96x96 RGB; the car sits at columns 46-49 around rows 66-77 and rows 84-95
are the dashboard. Road pixels are grey (red, green and blue within a few levels of each
other, neither black nor white); grass is green. In two bands of rows ahead of the car
(near: 52-64, far: 30-40) it finds the road's columns, takes the centre of the run of road
nearest the car's column, and steers toward a blend of the two centres. Gas is kept low
(more where the far band is centred, so straights go faster), with a light brake into
sharp bends. Off the road it steers toward the nearest road column it can see.

With randomized colours (the environment parameter domain_randomize, profile
randomized) no road is grey: the car waits on the start line until the opening zoom ends
(50 frames), takes the colour just ahead of it as the road's, and from then on counts
pixels near that colour as road.
"""

import numpy as np

CAR_COLUMN = 48.0
NEAR, FAR = (52, 64), (30, 40)


ZOOMED = 50  # frames until the view has zoomed in on the car


def road_mask(frame):
    rgb = frame[:84].astype(np.int16)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (np.abs(g - r) < 20) & (np.abs(g - b) < 20) & (r > 60) & (r < 200)


def colour_mask(frame, colour):
    rgb = frame[:84].astype(np.int16)
    return np.abs(rgb - colour).max(axis=2) < 14


def centre(mask, rows):
    """Mean column of the road run nearest the car in the band, or None without road."""
    band = mask[rows[0] : rows[1]].mean(axis=0) > 0.5
    columns = np.flatnonzero(band)
    if columns.size == 0:
        return None
    start = int(columns[np.argmin(np.abs(columns - CAR_COLUMN))])
    left = right = start
    while left > 0 and band[left - 1]:
        left -= 1
    while right < band.size - 1 and band[right + 1]:
        right += 1
    return (left + right) / 2.0


class Driver:
    def __init__(self, randomized=False):
        self.steps = 0
        self.steer = 0.0
        self.randomized = randomized
        self.road = None  # with randomized colours, the road's, learnt at ZOOMED

    def act(self, observation):
        self.steps += 1
        if not self.randomized:
            mask = road_mask(observation)
        elif self.steps < ZOOMED:
            return [0.0, 0.0, 0.0]  # wait on the start line for the zoom
        else:
            if self.road is None:
                patch = observation[58:64, 45:52].reshape(-1, 3).astype(np.int16)
                self.road = np.median(patch, axis=0)
            mask = colour_mask(observation, self.road)
        near, far = centre(mask, NEAR), centre(mask, FAR)
        if near is None and far is None:
            return [self.steer, 0.05, 0.0]  # keep turning the way it was, slowly
        if near is None:
            near = far
        if far is None:
            far = near
        error = (0.6 * (near - CAR_COLUMN) + 0.4 * (far - CAR_COLUMN)) / 48.0
        steer = max(-1.0, min(1.0, 2.5 * error))
        self.steer = steer
        bend = abs(far - CAR_COLUMN) / 48.0
        gas = 0.12 if bend > 0.25 else 0.25
        brake = 0.2 if bend > 0.4 and self.steps % 3 == 0 else 0.0
        return [steer, gas, brake]


def make_policy(context):
    parameters = getattr(context, "environment_parameters", None) or {}
    return Driver(randomized=bool(parameters.get("domain_randomize")))
