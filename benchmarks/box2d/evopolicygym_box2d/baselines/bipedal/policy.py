"""BipedalWalker baseline: a three-phase gait with joint-angle targets and PD torques.

The legs take turns. The swinging leg lifts (hip forward, knee bent) while the standing
leg straightens; once the standing leg's hip has swept behind the hull, the swinging leg
reaches forward and down until its foot touches; then the new standing leg pushes off
(the old one's knee extends) and the roles swap. Each joint's torque is a PD term toward
its target; on top, both hips lean against the hull's tilt and both knees damp its
vertical speed, which keeps the hull level. No lidar: rough ground (hardcore) trips it.
"""

HULL_ANGLE, HULL_SPIN, VX, VY = 0, 1, 2, 3
# Per leg: hip angle, hip speed, knee angle, knee speed, foot contact.
LEG = (4, 9)
LIFT, PLANT, PUSH = "lift", "plant", "push"
CRUISE = 0.2  # forward speed (observation units) above which the stance knee yields faster
STANCE_KNEE = 0.0  # the stance knee straight: a slower, steadier stride
LEVEL_TILT, LEVEL_SPIN = 0.9, 3.0  # hip torque against the hull's tilt and its rate
DAMP_VY = 15.0  # knee torque against vertical speed


def clip(x, low=-1.0, high=1.0):
    return low if x < low else high if x > high else x


class Gait:
    def __init__(self):
        self.phase = LIFT
        self.swing = 0  # the leg in the air
        self.stance_knee = STANCE_KNEE

    def act(self, observation):
        s = [float(v) for v in observation[:14]]
        swing, stance = LEG[self.swing], LEG[1 - self.swing]
        hip = {swing: None, stance: None}
        knee = {swing: None, stance: None}
        if self.phase == LIFT:
            hip[swing], knee[swing] = 1.1, -0.6
            self.stance_knee = min(
                self.stance_knee + (0.06 if s[VX] > CRUISE else 0.03), STANCE_KNEE
            )
            knee[stance] = self.stance_knee
            if s[stance] < 0.10:  # the stance hip has swept behind: reach forward
                self.phase = PLANT
        if self.phase == PLANT:
            hip[swing], knee[swing] = 0.1, STANCE_KNEE
            knee[stance] = self.stance_knee
            if s[swing + 4] > 0.5:  # foot down
                self.phase = PUSH
                self.stance_knee = min(s[swing + 2], STANCE_KNEE)
        if self.phase == PUSH:
            knee[swing] = self.stance_knee
            knee[stance] = 1.0
            if s[stance + 2] > 0.88 or s[VX] > 1.2 * CRUISE:
                self.phase = LIFT
                self.swing = 1 - self.swing
        action = []
        level = LEVEL_TILT * s[HULL_ANGLE] + LEVEL_SPIN * s[HULL_SPIN]
        for base in LEG:
            torque_hip = (
                0.0 if hip[base] is None else 0.9 * (hip[base] - s[base]) - 0.25 * s[base + 1]
            )
            torque_knee = (
                0.0 if knee[base] is None else 4.0 * (knee[base] - s[base + 2]) - 0.25 * s[base + 3]
            )
            torque_hip += level
            torque_knee -= DAMP_VY * s[VY]
            action += [clip(0.5 * torque_hip), clip(0.5 * torque_knee)]
        return action


def make_policy(context):
    return Gait()
